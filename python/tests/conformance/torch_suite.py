"""torch's own distributed test suite (DistributedTest._DistTestBase, from the installed
torch: never a copy of it) run against a backend, as torch_ucc was validated:

    BACKEND=strata WORLD_SIZE=3 python -m pytest -q python/tests/conformance/torch_suite.py -k SELECTION

Each test spawns WORLD_SIZE processes that meet through a file:// rendezvous. The feature
sets a backend claims decide which tests the suite runs instead of skipping:

- plugin: a third-party backend registered through Backend.register_backend;
- ddp: DistributedDataParallel over it (its tests run on CPU here);
- subgroup: new_group and the subgroup helpers.

strata claims all three for CPU tensors. gpu/cuda are not claimed: the suite's GPU tests
place each rank on its own device, which a one-GPU machine cannot give 3 ranks, and the
device path is checked by the device checks (scripts/device/check.sh) instead.

Tests the suite runs on strata that cannot pass by what they assert, whatever the backend
does (each fails on any backend but the ones it names):

- test_ddp_logging_data_cpu: asserts the logged backend name is "gloo"; torch logs any
  third-party backend as "custom".
"""
import os

os.environ.setdefault("BACKEND", "strata")
os.environ.setdefault("WORLD_SIZE", "3")

BACKEND = os.environ["BACKEND"]
if BACKEND not in ("gloo", "nccl", "ucc", "mpi"):
    import strata.torch  # noqa: F401  registers the backend, in the spawned ranks too
    from torch.testing._internal.common_distributed import DistTestCases

    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add(BACKEND)

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    from torch.testing._internal.common_utils import run_tests

    run_tests()
