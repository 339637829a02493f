"""The edge's parts that are not a door of their own (docs/architecture.md): doors kept here for
their public names — job kinds (``jobs``), the pytest plugin (``pytest_plugin``, its entry-point
name), bearer tokens (``auth``), the Host/Origin guard (``http_guard``) — and infrastructure the
operations use — an Action run on files (``action_entry``), the event store, LLM providers
(``llm_http``), OpenTelemetry (``otel_*``). No solving logic, no permission decisions."""
