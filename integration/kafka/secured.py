"""A secured single-node KRaft cluster: SASL/PLAIN principals and Kafka's StandardAuthorizer.

The compose file's cluster runs PLAINTEXT without an authorizer, so no test
there can tell what rackplan does when a principal lacks a right.  This one
node (broker and controller in one process, rack ``az-a``) authenticates every
connection, client, inter-broker and controller alike, with SASL/PLAIN over
``SASL_PLAINTEXT`` and authorizes every request with the ``StandardAuthorizer``:
``User:admin`` is the only super user (the node itself authenticates as admin),
and with ``allow.everyone.if.no.acl.found=false`` a principal may do only what
an ACL allows.  ACLs are set with Kafka's own ``kafka-acls`` (``AclCommand``),
as docs/security.md tells operators.

The users and passwords are test fixtures on loopback, not secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from integration.kafka.cluster import TEST_OVERRIDES, KafkaCluster, LauncherError, run_tool
from integration.kafka.compose import ComposeCluster, NodeSpec, load_compose

#: principal name -> password of every SASL/PLAIN user the node accepts
USERS: Mapping[str, str] = {
    "admin": "admin-pw",
    "agent": "agent-pw",
    "follower": "follower-pw",
    "intruder": "intruder-pw",
    "stranger": "stranger-pw",
}
SUPER_USER = "admin"


def _jaas(users: Mapping[str, str]) -> str:
    """The PLAIN login module: the node's own identity (admin) and every user it accepts."""
    accepted = " ".join(f'user_{u}="{pw}"' for u, pw in sorted(users.items()))
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{SUPER_USER}" password="{users[SUPER_USER]}" {accepted};'
    )


def secured_compose(users: Mapping[str, str] = USERS, rack: str = "az-a") -> ComposeCluster:
    """One combined broker+controller, every listener SASL_PLAINTEXT/PLAIN, the StandardAuthorizer on."""
    jaas = _jaas(users)
    props = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "broker.rack": rack,
        # ports and hosts are the launcher's (free loopback ports); the names are what matter here
        "listeners": "EXTERNAL://:9092,CONTROLLER://:9093",
        "advertised.listeners": "EXTERNAL://localhost:9092",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "EXTERNAL",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config": jaas,
        "listener.name.controller.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{SUPER_USER}",
        "allow.everyone.if.no.acl.found": "false",
        # one node: every internal topic has one replica
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    spec = NodeSpec("kafka-secured", 1, ("broker", "controller"), rack, props)
    base = load_compose()
    return ComposeCluster(base.cluster_id, base.image, (spec,))


def client_config(user: str, users: Mapping[str, str] = USERS) -> dict[str, str]:
    """librdkafka settings (the agent's ``kafka.config``, a follower's consumer config) of one user."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": users[user],
    }


@dataclass
class SecuredCluster(KafkaCluster):
    """:class:`KafkaCluster` on :func:`secured_compose`; its own clients connect as the super user."""

    compose: ComposeCluster = field(default_factory=secured_compose)
    client_config: Mapping[str, str] = field(default_factory=lambda: client_config(SUPER_USER))
    #: one node holds every partition of the offsets topic: three are plenty
    overrides: Mapping[str, str] = field(
        default_factory=lambda: {**TEST_OVERRIDES, "offsets.topic.num.partitions": "3"}
    )

    def admin_properties(self) -> Path:
        """The ``--command-config`` file of Kafka's tools: the super user's SASL settings."""
        assert self.workdir is not None
        path = self.workdir / "admin.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{SUPER_USER}" password="{USERS[SUPER_USER]}";\n'
        )
        return path

    def kafka_acls(self, *args: str) -> str:
        """``kafka-acls.sh --bootstrap-server <this> --command-config admin.properties <args>``."""
        for _attempt in range(3):  # the admin client's own 60 s wait for the one node can run out under load
            r = run_tool(
                "org.apache.kafka.tools.AclCommand",
                "--bootstrap-server",
                self.bootstrap,
                "--command-config",
                str(self.admin_properties()),
                *args,
            )
            if r.returncode == 0 or "Timed out waiting for a node assignment" not in r.stderr + r.stdout:
                break
        if r.returncode != 0:
            raise LauncherError(
                f"kafka-acls {' '.join(args)} failed: {(r.stderr or r.stdout).strip()[-600:]}"
            )
        return r.stdout
