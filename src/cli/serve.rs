//! `agent-host serve`: the A2A server until SIGINT or SIGTERM.

use crate::app::{App, StartError};
use crate::settings::Settings;

/// Resolves when SIGINT or SIGTERM arrives.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => tracing::info!("SIGTERM received"),
                _ = i.recv() => tracing::info!("SIGINT received"),
            }
        }
        _ => {
            tracing::warn!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await
        }
    }
}

/// `agent-host serve`: binds (port 0 picks a free port; the log line "agent-host listening
/// on http://ADDR" names the bound address), starts the [`App`], serves until SIGINT or
/// SIGTERM.
pub async fn serve(settings: Settings) -> Result<(), StartError> {
    settings.check_open_bind()?;
    crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    if let crate::settings::StoreChoice::Sqlite(path) = &settings.store {
        // Before taking the port: a second host started with the same settings would
        // otherwise fail on the port in use, without saying which host has it.
        crate::store::lock::check(path).map_err(StartError::Store)?;
    }
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|e| StartError::Bind(settings.bind.to_string(), e))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| StartError::Bind(settings.bind.to_string(), e))?;
    let app = App::start(&settings, local_addr).await?;
    app.serve(listener, shutdown_signal()).await?;
    // The cgroup folders kept for later tasks, and the host's own ones when empty.
    crate::runner::sandbox::Capabilities::get()
        .cgroups
        .release();
    tracing::info!("stopped");
    Ok(())
}
