"""Child-process entry point of a probe: `python -m evaluators.worker` reads a ProbeJob (JSON) on stdin."""


from evaluators.runner import child_main

if __name__ == "__main__":
    child_main()
