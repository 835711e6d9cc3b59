"""A remote ``crawl_dir`` (s3://bucket/prefix): jobs work in a local staging copy that is pulled and published.

location.py  which crawl_dir is remote, and where its staging copy lives
access.py    what each command reads and writes (declared in the CLI's command table)
bucket.py    the object store: transfers through pyarrow.fs, conditional PUTs through boto3
lease.py     the writer lock on object storage: a lease object renewed while the job runs
stores.py    pull and publish of the versioned webdb / linkdb
segments.py  pull and publish of segments, markers last
partition_lease.py  the fetch lease of a segment partition: one machine fetches it at a time
credentials.py  the driver's AWS credentials, carried in Spark tasks
session.py   the seam: pull before a command, publish after it (and after each crawl round)
"""
