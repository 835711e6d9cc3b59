"""Where the crawl lives: a local crawl_dir, or a remote one (s3://bucket/prefix) worked in a staging copy.

workspace.py  the seam: one workspace chosen from the config (local, bucket, or Spark over a bucket by step);
              commands and the daemon ask it for staged steps and paths, never where the crawl lives
access.py    what each command reads and writes (ACCESS, which the CLI hands to its commands)
location.py  which crawl_dir is remote, and where its staging copy lives (defined in crawler/crawldir.py)
bucket.py    the object store: transfers through pyarrow.fs, conditional PUTs through boto3
bucket_io.py  the Spark engine's reads and writes on the bucket (executors in a reference tree)
lease.py     the writer lock on object storage: a lease object renewed while the job runs
stores.py    pull and publish of the versioned webdb / linkdb
segments.py  pull and publish of segments, markers last
partition_lease.py  the fetch lease of a segment partition: one machine fetches it at a time
credentials.py  the driver's AWS credentials, carried in Spark tasks
session.py   one command's staging: lease and pull before it, publish after it (and after each crawl round)
retention.py  daemon.keep_segments applied to the bucket
"""
