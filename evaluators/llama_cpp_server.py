"""llama-cpp-python's OpenAI server (`python -m llama_cpp.server`, same arguments) with llama.cpp's extra CPU buffer
types off: the server's model parameters come from ``llama_cpp.llama_model_default_params()``, which leaves
``use_extra_bufts`` on, and llama_cpp.server has no setting for it. On a CPU that advertises AMX, llama.cpp repacks
the weights for its AMX kernels there, and on this project's development and CI machines (Firecracker VMs whose CPUs
list amx_tile / amx_int8 and grant the AMX state) the first decode then dies in ggml_backend_amx_mul_mat (SIGSEGV;
2026-12-02, llama-cpp-python 0.3.36, SmolLM2-135M Q4_1). The probes' own llama.cpp engine turns them off for the same
reason (evaluators/llama_cpp.py); ``recommender run`` starts the server through this module on such a CPU and says so.
"""

from __future__ import annotations


def main() -> None:
    import llama_cpp.llama_cpp as lib  # noqa: PLC0415 (the child side: llama-cpp-python only here)

    default = lib.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    lib.llama_model_default_params = params  # llama_cpp.Llama reads it through the module at load time
    from llama_cpp.server.__main__ import main as serve  # noqa: PLC0415

    serve()


if __name__ == "__main__":
    main()
