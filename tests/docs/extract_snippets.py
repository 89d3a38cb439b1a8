#!/usr/bin/env python3
"""Writes every C++ block of the given Markdown pages to OUT_DIR as a source
file, and prints their names (one per line). A block with a main() is a whole
program and is written as it is; any other is a fragment, written as the body
of a function given the names fragments use (doc_fragment.h), with its
#include lines moved to the top. Usage: extract_snippets.py OUT_DIR PAGE.md..."""
import re
import sys
from pathlib import Path

FRAGMENT = """{includes}
#include "doc_fragment.h"

// {page}, C++ block {number} (line {line}): a fragment, built as a function's
// body; the function is never called.
[[maybe_unused]] static void fragment(dfl::backend::Client& client, const dfl::ArtifactKey& key,
                                      std::uint64_t size, const std::string& sha256_hex,
                                      const std::string& good_digest,
                                      const std::string& old_digest,
                                      const dfl::backend::ArtifactRef& ref) {{
  using namespace doc;
  {{
{body}
  }}
}}

int main() {{ return 0; }}
"""


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in map(Path, sys.argv[2:]):
        text = page.read_text()
        for number, match in enumerate(re.finditer(r"^```cpp\n(.*?)^```", text, re.M | re.S), 1):
            code = match.group(1)
            line = text.count("\n", 0, match.start()) + 2
            name = f"doc_{page.stem.lower()}_{number}"
            if re.search(r"\bint main\s*\(", code):
                source = f"// {page.name}, C++ block {number} (line {line}).\n{code}"
            else:
                lines = code.splitlines()
                includes = "\n".join(x for x in lines if x.startswith("#include"))
                body = "\n".join(x for x in lines if not x.startswith("#include"))
                source = FRAGMENT.format(includes=includes, page=page.name, number=number,
                                         line=line, body=body)
            path = out / f"{name}.cpp"
            if not path.exists() or path.read_text() != source:  # Unchanged: not rebuilt.
                path.write_text(source)
            written.append(name)
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
