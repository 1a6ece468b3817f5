"""The terminal during online play: standard input as an asyncio queue, and a screen that
knows whether a prompt is showing.

Online, events (the opponent's guess, a clock running out) arrive while the person is typing;
these two let an event break a prompt cleanly and let the match wait for a line and an event
at once.
"""

from __future__ import annotations

import asyncio
import sys
import threading


class LineReader:
    """Standard input as an asyncio queue, read by one daemon thread for the whole run.

    A thread per ``input()`` call cannot be cancelled and would swallow the next line; one
    long-lived reader hands every line to whoever asks next. ``None`` means end of input.
    """

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def pump() -> None:
            while True:
                line = sys.stdin.readline()
                loop.call_soon_threadsafe(self.queue.put_nowait, line if line else None)
                if not line:
                    return

        threading.Thread(target=pump, name="stdin", daemon=True).start()

    async def get(self) -> str | None:
        msg = await self.queue.get()
        if msg is None:
            self.queue.put_nowait(None)  # stays at end of input
        return msg


class Screen:
    """Prints lines, remembering whether a prompt is showing so an event can break it cleanly."""

    def __init__(self) -> None:
        self.prompt: str | None = None

    def say(self, text: str) -> None:
        if self.prompt is not None:
            sys.stdout.write("\n")
            self.prompt = None
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def ask(self, prompt: str) -> None:
        if self.prompt == prompt:
            return
        if self.prompt is not None:
            sys.stdout.write("\n")
        sys.stdout.write(prompt)
        sys.stdout.flush()
        self.prompt = prompt

    def answered(self) -> None:
        self.prompt = None
