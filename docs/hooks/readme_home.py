"""The site's home page is the repository's README: one text, read on GitHub and on the site.

The README links to the reference as `docs/PAGE.md`, a path that works on GitHub from the
repository root; on the site the home page sits beside those pages, so the prefix goes.
Any other relative link in the README points outside the site, and the strict build
reports it like any broken link.
"""

from pathlib import Path

from mkdocs.structure.files import File


def on_files(files, config):
    readme = Path(config.config_file_path).parent / "README.md"
    text = readme.read_text(encoding="utf-8").replace("](docs/", "](")
    files.append(File.generated(config, "index.md", content=text))
    return files
