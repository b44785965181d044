"""The `stream-app` commands and the tools they use: worker, demo, broker, producer, replay."""
