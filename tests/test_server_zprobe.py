import json
pytest_plugins = ["pytest_jupyter.jupyter_server"]
import pytest

@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"dsh_jupyter": True}}}

async def test_status(jp_fetch):
    r = await jp_fetch("api", "status")
    assert r.code == 200

async def test_dsh(jp_fetch):
    r = await jp_fetch("dsh", "api", "candidates")
    assert r.code == 200
