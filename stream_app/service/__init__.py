"""The Faust shell around the core: settings, one stage class per hop, outputs, web pages, the
Prometheus exporter, and everything that touches Kafka."""
