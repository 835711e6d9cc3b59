from tests.jobs.conftest import cfg, make_segment  # noqa: F401 - the job fixtures, shared
