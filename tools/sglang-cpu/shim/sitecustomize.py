# CPU-only rehearsal shim (SGLANG_USE_CPU_ENGINE=1 without a GPU): SGLang's PD path calls CUDA for
# bookkeeping around the KV transfer, never for the transfer itself (mooncake over TCP reads host
# memory). Each no-op below names the call site that needs it; the transfer logic is untouched.
import os

if os.environ.get("SGLANG_USE_CPU_ENGINE") == "1":
    try:
        import torch
        import torch.cuda

        if not torch.cuda.is_available():
            # srt/mem_cache/pool_host/common.py:147-181: the decode host pool registers its
            # pinned buffers with cudaHostRegister.
            class _FakeCudart:
                def cudaHostRegister(self, *a, **k):
                    return 0

                def cudaHostUnregister(self, *a, **k):
                    return 0

            torch.cuda.cudart = lambda: _FakeCudart()

            # srt/disaggregation/prefill.py:1753-1761: the prefill copies the page indices to a
            # pinned host tensor and records an event on the current stream, which the transfer
            # worker waits on before it reads them. On CPU the copy is synchronous, so the event
            # is already complete.
            class _DoneEvent:
                def __init__(self, *a, **k):
                    pass

                def record(self, *a, **k):
                    return None

                def synchronize(self):
                    return None

                def wait(self, *a, **k):
                    return None

                def query(self):
                    return True

            class _Stream:
                cuda_stream = 0

                def synchronize(self):
                    return None

                def wait_event(self, *a, **k):
                    return None

                def wait_stream(self, *a, **k):
                    return None

            torch.cuda.Event = _DoneEvent
            torch.cuda.current_stream = lambda *a, **k: _Stream()

            # pin_memory=True needs a CUDA driver; pinned or not, the host tensor holds the same
            # bytes (prefill.py:1753-1758).
            def _unpinned(fn):
                def call(*a, pin_memory=False, **k):
                    return fn(*a, **k)

                return call

            torch.empty = _unpinned(torch.empty)
            torch.zeros = _unpinned(torch.zeros)
    except Exception:
        pass
