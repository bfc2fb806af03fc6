"""Cluster metadata of the in-memory cluster, in confluent_kafka's own metadata classes."""

from __future__ import annotations

from confluent_kafka import KafkaError
from confluent_kafka.admin._metadata import ClusterMetadata, PartitionMetadata, TopicMetadata

from testkit.driver.cluster import Cluster


def cluster_metadata(cluster: Cluster, topic: str | None = None) -> ClusterMetadata:
    """Every topic, or just `topic` (with UNKNOWN_TOPIC_OR_PART as its error if missing)."""
    meta = ClusterMetadata()
    with cluster.lock:
        names = sorted(cluster.logs) if topic is None else [topic]
        for name in names:
            info = TopicMetadata()
            info.topic = name
            if name not in cluster.logs:
                info.error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            else:
                for p in range(len(cluster.logs[name])):
                    partition = PartitionMetadata()
                    partition.id = p
                    partition.leader = 0
                    info.partitions[p] = partition
            meta.topics[name] = info
    return meta
