import os


def topic_name() -> str:
    return f"app-events-{os.getpid()}"
