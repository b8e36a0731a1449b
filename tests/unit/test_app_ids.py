from agora.harness.system import app_id_hosting


def test_a_service_deployed_alone_is_its_own_app() -> None:
    assert app_id_hosting("escalation", {"registry", "escalation", "console"}) == "escalation"


def test_the_embedded_app_hosts_every_service() -> None:
    assert app_id_hosting("escalation", {"agora"}) == "agora"


def test_with_nothing_running_the_service_name_is_the_app_id() -> None:
    assert app_id_hosting("registry", set()) == "registry"
