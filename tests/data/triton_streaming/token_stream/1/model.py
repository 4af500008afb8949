"""Streams MAX_TOKENS tokens: the first after FIRST_MS, each next one GAP_MS later, then a final empty response.

The delays are scripted (absolute deadlines from the request's arrival in ``execute``, so sleep overshoot does not
accumulate); the test compares the client's own stream timestamps with what Triton reports.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            start = time.monotonic()
            sender = request.get_response_sender()
            n = max(0, min(_scalar(request, "MAX_TOKENS"), 256))
            first, gap = _scalar(request, "FIRST_MS") / 1000.0, _scalar(request, "GAP_MS") / 1000.0
            base = _scalar(request, "PROMPT_LEN")
            for i in range(n):
                delay = start + first + i * gap - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                token = pb_utils.Tensor("TOKEN", np.array([base + i], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[token]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
