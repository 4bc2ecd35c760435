"""A tiny sample application for the hookcage demo."""


def greet(name: str) -> str:
    # TODO: localise the greeting
    return f"Hello, {name}!"   
