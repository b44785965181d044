"""How the worker starts: Faust's web server comes up before the producer connects."""

from __future__ import annotations

from stream_app.service.app import create_app
from stream_app.service.settings import load_settings


def test_web_server_starts_before_the_producer() -> None:
    app = create_app(load_settings(broker_url="127.0.0.1:1"))
    services = list(app.boot_strategy.server())
    assert app.web in services
    assert services.index(app.web) < services.index(app.producer)
    assert services.index(app.producer) < services.index(app.consumer)
