#!/usr/bin/env python3
"""A complete function-calling loop with nsbox as the run_python tool.

The model here is a stand-in (no network): a scripted function that, like
a real chat model, answers either with tool calls or with its final text.
Replace StandInModel.reply with your model's API call; the rest stays:

  1. declare the tool: nsbox.tool_schema() is the run_python definition
     (the one `nsbox mcp` declares), a JSON schema most APIs take as is;
  2. for each tool call the model makes, nsbox.tool_call() runs it in a
     fresh sandbox (or, with --stateful, in one live sandbox for the whole
     conversation) and returns the text the model reads;
  3. send that text back as the tool's result, until the model answers.

Usage: agent_tool.py [--server unix:PATH|http://HOST:PORT] [--stateful]
(without --server, runs through the local nsbox CLI; NSBOX_CONFIG may name
its configuration).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Union

import nsbox

Message = Dict[str, Any]


class StandInModel:
    """Answers a question about numbers by writing Python, reading the
    output, fixing its own mistake once, then answering."""

    def __init__(self) -> None:
        self.turn = 0

    def reply(self, messages: List[Message], tools: List[Dict[str, Any]]) -> Message:
        assert tools[0]["name"] == "run_python"
        self.turn += 1
        if self.turn == 1:  # a first try with a bug in it
            return call("c1", "numbers = [3, 1, 4, 1, 5, 9, 2, 6]\nprint(sum(numbers) / len(numbrs))")
        last = messages[-1]["content"]
        if self.turn == 2 and "NameError" in last:  # read the traceback, fix the typo
            return call("c2", "numbers = [3, 1, 4, 1, 5, 9, 2, 6]\nprint(sum(numbers) / len(numbers))")
        mean = last.split("--- stdout ---\n", 1)[1].split("\n", 1)[0]
        return {"role": "assistant", "content": f"The mean is {mean}."}


def call(call_id: str, code: str) -> Message:
    return {
        "role": "assistant",
        "tool_calls": [{"id": call_id, "name": "run_python", "arguments": json.dumps({"code": code, "timeout": 5})}],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", help="an nsbox serve: unix:PATH or http://HOST:PORT")
    ap.add_argument("--token-file", help="the bearer token of a TCP server")
    ap.add_argument("--stateful", action="store_true", help="one live sandbox for the conversation")
    args = ap.parse_args()

    client = nsbox.Client(args.server, token_file=args.token_file) if args.server else nsbox.Client()
    tools = [nsbox.tool_schema(stateful=args.stateful)]
    model = StandInModel()
    messages: List[Message] = [{"role": "user", "content": "What is the mean of 3 1 4 1 5 9 2 6?"}]
    with client:
        target: Union[nsbox.Client, nsbox.Sandbox] = client.sandbox() if args.stateful else client
        try:
            for _ in range(8):  # never loop forever on a model's say-so
                answer = model.reply(messages, tools)
                messages.append(answer)
                if "tool_calls" not in answer:
                    print(answer["content"])
                    return 0
                for tc in answer["tool_calls"]:
                    text = nsbox.tool_call(target, json.loads(tc["arguments"]))
                    print(f"--- run_python ({tc['id']}) ---\n{text}", file=sys.stderr)
                    messages.append({"role": "tool", "tool_call_id": tc["id"], "content": text})
            print("the model did not answer within 8 turns", file=sys.stderr)
            return 1
        finally:
            if isinstance(target, nsbox.Sandbox):
                target.close()


if __name__ == "__main__":
    sys.exit(main())
