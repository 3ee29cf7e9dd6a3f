//! OpenTelemetry export (the `otel` cargo feature): the task spans go to an OTLP/HTTP collector,
//! and a task whose request carried a W3C `traceparent` joins that trace.
//!
//! Without the feature, [`set_remote_parent`] does nothing, so the engine calls it either way.

/// Makes `span` a child of the remote span named by a W3C `traceparent` header value.
#[cfg(feature = "otel")]
pub fn set_remote_parent(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::propagation::TextMapPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let carrier =
        std::collections::HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
    // Fails only when no OpenTelemetry layer is installed: then there is nothing to join.
    let _ = span.set_parent(cx);
}

/// Without the `otel` feature there is no trace to join.
#[cfg(not(feature = "otel"))]
pub fn set_remote_parent(_span: &tracing::Span, _traceparent: &str) {}

#[cfg(feature = "otel")]
pub use export::{layer_from_env, ExportError, Exporter, OtelLayer};

#[cfg(feature = "otel")]
mod export {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// The exporter could not be built (a bad endpoint).
    #[derive(Debug, thiserror::Error)]
    #[error("OpenTelemetry exporter: {0}")]
    pub struct ExportError(String);

    /// The tracing layer that turns spans into OpenTelemetry spans.
    pub type OtelLayer<S> =
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>;

    /// Keeps the exporter running; dropping it flushes the spans not sent yet.
    pub struct Exporter(SdkTracerProvider);

    impl Drop for Exporter {
        fn drop(&mut self) {
            if let Err(e) = self.0.shutdown() {
                eprintln!("agent-host: flushing OpenTelemetry spans: {e}");
            }
        }
    }

    /// A tracing layer exporting spans over OTLP/HTTP, when `OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (the exporter reads them, and the other
    /// standard `OTEL_EXPORTER_OTLP_*` variables, itself); None otherwise.
    pub fn layer_from_env<S>() -> Result<Option<(OtelLayer<S>, Exporter)>, ExportError>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
        if !set("OTEL_EXPORTER_OTLP_ENDPOINT") && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            return Ok(None);
        }
        use opentelemetry_otlp::WithExportConfig as _;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build()
            .map_err(|e| ExportError(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("agent-host")
                    .build(),
            )
            .build();
        let tracer = provider.tracer("agent-host");
        Ok(Some((
            tracing_opentelemetry::layer().with_tracer(tracer),
            Exporter(provider),
        )))
    }
}

#[cfg(test)]
#[cfg(feature = "otel")]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use tracing_subscriber::layer::SubscriberExt;

    /// Keeps the spans it is given.
    #[derive(Debug, Clone, Default)]
    struct Collect(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Collect {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    #[test]
    fn a_task_span_joins_the_callers_trace() {
        let exporter = Collect::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let sub = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(sub, || {
            let span = tracing::info_span!("task", task = "t1");
            super::set_remote_parent(
                &span,
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            );
            span.in_scope(|| tracing::info!("working"));
        });
        provider.force_flush().unwrap();
        let spans = exporter.0.lock().unwrap().clone();
        let task = spans.iter().find(|s| s.name == "task").expect("task span");
        assert_eq!(
            task.span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(task.parent_span_id.to_string(), "b7ad6b7169203331");
    }

    #[test]
    fn no_endpoint_no_exporter() {
        std::env::remove_var("OTEL_EXPORTER_OTLP_ENDPOINT");
        std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let l = super::layer_from_env::<tracing_subscriber::Registry>().unwrap();
        assert!(l.is_none());
    }
}
