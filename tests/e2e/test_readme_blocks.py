"""How the live-stack test finds README's command blocks: every ```bash block of a section, as written."""

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.live_stack import README_COMMAND_SECTIONS, readme_section, shell_blocks

pytestmark = pytest.mark.unit

TEXT = """# Title
## One
intro
1. step:

   ```bash
   racing scrape
   racing audit --json
   ```
2. more
```python
print("not shell")
```
### One.sub
```bash
curl -s http://127.0.0.1:3000/x
```
## Two
```bash
not in one
```
"""


def test_a_section_runs_to_the_next_heading_of_its_level_and_keeps_its_subsections() -> None:
    one = readme_section(TEXT, "## One")
    assert one.startswith("## One\n") and "### One.sub" in one and "not in one" not in one
    assert readme_section(TEXT, "### One.sub").endswith("```\n") and "## Two" not in readme_section(TEXT, "### One.sub")


def test_shell_blocks_are_taken_as_written_with_a_list_items_indent_removed() -> None:
    assert shell_blocks(readme_section(TEXT, "## One")) == [
        "racing scrape\nracing audit --json\n", "curl -s http://127.0.0.1:3000/x\n"]


def test_every_command_section_of_the_readme_has_shell_blocks() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    for heading in README_COMMAND_SECTIONS:
        assert shell_blocks(readme_section(readme, heading)), heading
