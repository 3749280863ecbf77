"""The built wheel installs under the one name `ottla`, so it cannot shadow a user's own
packages: installed into a fresh virtual environment beside a project that has its
own `storage` and `protocol` packages, both the project's modules and Ottla's pytest
fixtures work in the same test session; the web console's static files and the schema
registry are in it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = '''
import json
import urllib.request

import protocol
import storage

from ottla.tools.client import Cluster


def test_own_packages_beside_ottla_fixtures(ottla_broker, ottla_topic, ottla_schema_registry):
    # The project's packages, not Ottla's layers of the same name.
    assert storage.OWNER == "user-project"
    assert protocol.OWNER == "user-project"
    with Cluster(ottla_broker.bootstrap) as cluster:
        assert list(cluster.partitions(ottla_topic)) == [0]
    # The web console's script and style sheet come from the installed package.
    for name in ("console.js", "console.css"):
        with urllib.request.urlopen(f"{ottla_broker.admin_url}/console/static/{name}") as answer:
            assert answer.status == 200 and len(answer.read()) > 1000
    with urllib.request.urlopen(f"{ottla_broker.admin_url}/console/topics") as answer:
        assert ottla_topic in answer.read().decode()
    # The schema registry (its package and its avro, jsonschema, protobuf dependencies) is in it.
    with urllib.request.urlopen(f"{ottla_schema_registry}/schemas/types") as answer:
        assert answer.read() == b'["JSON", "PROTOBUF", "AVRO"]'
    # PROTOBUF: protoc (grpcio-tools) and its copy of the well-known types come along.
    text = ('syntax = "proto3"; import "google/protobuf/timestamp.proto"; '
            'message P { google.protobuf.Timestamp at = 1; }')
    request = urllib.request.Request(f"{ottla_schema_registry}/subjects/p-value/versions", method="POST",
                                     data=json.dumps({"schemaType": "PROTOBUF", "schema": text}).encode(),
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request) as answer:
        assert json.loads(answer.read())["id"] >= 1
'''


def test_the_wheel_installs_under_ottla_beside_a_project_with_its_own_storage_and_protocol(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(ROOT)],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("ottla-*.whl")
    top_level = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert top_level == {"ottla", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert {"ottla/console/static/console.js", "ottla/console/static/console.css"} \
        <= set(zipfile.ZipFile(wheel).namelist())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    pytest_pin = next(line.strip().strip('",') for line in (ROOT / "pyproject.toml").read_text().splitlines()
                      if line.strip().startswith('"pytest=='))
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", str(wheel), pytest_pin],
                               capture_output=True, text=True, timeout=480, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]

    project = tmp_path / "project"
    for package in ("storage", "protocol"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text('OWNER = "user-project"\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_user.py").write_text(textwrap.dedent(USER_TEST))
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    ran = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                         capture_output=True, text=True, timeout=300, cwd=project,
                         env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "1 passed" in ran.stdout
