//! The writer of a child's stdin: one task per child, fed through a channel.

use std::io;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// A write request for the stdin writer task, answered when the bytes are written.
pub(super) type StdinRequest = (Vec<u8>, oneshot::Sender<io::Result<()>>);

/// Writes `initial`, then every request, to the child's stdin. Ends (closing stdin) when the
/// request channel is closed.
pub(super) async fn write_stdin_task(
    mut writer: Box<dyn AsyncWrite + Send + Unpin>,
    initial: Vec<u8>,
    mut requests: mpsc::Receiver<StdinRequest>,
) {
    if !initial.is_empty() {
        if let Err(e) = write_all(&mut writer, &initial).await {
            tracing::debug!(error = %e, "writing the initial stdin failed");
        }
    }
    while let Some((bytes, done)) = requests.recv().await {
        let result = write_all(&mut writer, &bytes).await;
        // The caller may have stopped waiting; nothing to do then.
        let _ = done.send(result);
    }
    let _ = writer.shutdown().await;
}

async fn write_all(writer: &mut (dyn AsyncWrite + Send + Unpin), bytes: &[u8]) -> io::Result<()> {
    writer.write_all(bytes).await?;
    writer.flush().await
}
