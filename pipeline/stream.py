"""`--follow`: the same analytics as a Spark Structured Streaming job over the growing log.

The `kafka-offsets` source's stream reader (ConsumerOffsetsStreamReader) gives each
micro-batch the `__consumer_offsets` batches appended since the last one: its offsets are,
per segment file, the position after the last whole batch (a batch still being written waits
for the next trigger). Each micro-batch's decoded rows are written under `<out>/_decoded/`
in a directory named by the batch id, replacing whatever a crashed run left there, so a
micro-batch that Spark runs again after a restart (same id, same offsets, from the
checkpoint under `<out>/_checkpoint/`) is not counted twice; then every output is computed
again from all decoded rows and the topic logs as they are now.

Segments are assumed to only grow: a segment that compaction rewrote is not read again
(the server compacts `__consumer_offsets` only when asked). A transactional commit whose
marker arrives in a later micro-batch than its records is not counted.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader

from .datasource import FilesPartition, pack
from .segments import OFFSETS_TOPIC, segment_file, segment_files, whole_batches_end


class ConsumerOffsetsStreamReader(DataSourceStreamReader):
    def __init__(self, path: str, partitions: int) -> None:
        self.path, self.n = path, partitions

    def initialOffset(self) -> dict:
        return {}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        """{segment path: end of its whole batches}; `start` (Spark >= 4.2) is where the
        last micro-batch ended: headers are read from there on."""
        start = start or {}
        out = dict(start)  # (a segment deleted since, by retention, keeps its last position)
        for f in segment_files(self.path, {OFFSETS_TOPIC}):
            try:
                out[f.path] = whole_batches_end(f.path, start.get(f.path, 0))
            except FileNotFoundError:
                pass
        return out

    def partitions(self, start: dict, end: dict) -> list[FilesPartition]:
        ranges = []
        for path, stop in sorted(end.items()):
            if stop > start.get(path, 0):
                try:
                    ranges.append(segment_file(path, start.get(path, 0), stop))
                except FileNotFoundError:
                    pass  # deleted by retention meanwhile: what it held is gone from the log too
        return [FilesPartition(files) for files in pack(ranges, self.n)] or [FilesPartition([])]

    def read(self, partition: FilesPartition):
        from .decode import decode_segments

        return decode_segments(partition.files)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: the files stay the server's


def start(spark, data_dir: str, out: str, interval_seconds: float = 10.0, **job_options):
    """Start the streaming query (returns it): each trigger decodes what was appended and
    writes every output again (pipeline.run.run with those rows)."""
    from . import register
    from .run import Outputs, run

    register(spark)
    outputs = Outputs(spark, out)
    decoded = outputs.of("_decoded")

    def process(rows, batch_id: int) -> None:
        rows.write.mode("overwrite").parquet(f"{decoded}/batch={batch_id}")
        everything = spark.read.option("basePath", decoded).parquet(decoded).drop("batch")
        run(spark, data_dir, out, offsets=everything, **job_options)

    n = spark.sparkContext.defaultParallelism
    return (spark.readStream.format("kafka-offsets").option("partitions", str(n)).load(data_dir)
            .writeStream.foreachBatch(process).option("checkpointLocation", outputs.of("_checkpoint"))
            .trigger(processingTime=f"{interval_seconds} seconds").start())
