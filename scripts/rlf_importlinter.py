"""The project's own import-linter contract type (registered in pyproject.toml's [tool.importlinter]).

import-linter's wildcards replace whole module names only, so "any package named rlf_plugin_*" cannot
be written as a forbidden contract; and a list of today's plugin names would let tomorrow's through.
This file holds two contract types: ``forbidden_prefix`` forbids every imported top-level package whose
name starts with a prefix; ``public_surface`` lets the packages whose names start with a prefix import only
the listed (documented) modules of another package.
"""

from __future__ import annotations

import sys
from pathlib import Path

from importlinter import Contract, ContractCheck, fields, output

# pyproject.toml's root_packages name every plugin, read from source: run import-linter through this
# file (`python scripts/rlf_importlinter.py --config pyproject.toml`, as tox's lint env does) and every
# plugins/*/src is on the path without a PYTHONPATH entry per plugin.
sys.path.extend(str(src) for src in sorted((Path(__file__).resolve().parent.parent / "plugins").glob("*/src")))


class ForbiddenPrefixContract(Contract):
    """``source_modules`` may not import, directly or indirectly, any top-level package whose name
    starts with one of ``forbidden_prefixes`` (needs ``include_external_packages = true``)."""

    type_name = "forbidden_prefix"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    forbidden_prefixes = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        prefixes = tuple(self.forbidden_prefixes)
        sources = [module.name for module in self.source_modules]
        targets = sorted(name for name in graph.modules
                         if "." not in name and name.startswith(prefixes) and name not in sources)
        output.verbose_print(verbose, f"Packages matching {', '.join(prefixes)}: {', '.join(targets) or 'none'}")
        chains = []
        for source in sources:
            for target in targets:
                chain = graph.find_shortest_chain(importer=source, imported=target, as_packages=True)
                if chain:
                    chains.append(list(chain))
        return ContractCheck(kept=not chains, metadata={"chains": chains})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for chain in check.metadata["chains"]:
            output.print_error(f"{chain[0]} imports {chain[-1]}: " + " -> ".join(chain))
            output.new_line()


class PublicSurfaceContract(Contract):
    """Every package whose top-level name starts with ``source_prefix`` imports, directly, only the
    ``public_modules`` of ``target_package`` (and not their submodules): the rest is the target's own."""

    type_name = "public_surface"

    source_prefix = fields.StringField()
    target_package = fields.StringField()
    public_modules = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        public = set(self.public_modules)
        target = self.target_package
        sources = sorted(name for name in graph.modules if name.split(".")[0].startswith(self.source_prefix))
        output.verbose_print(verbose, f"{len(sources)} modules of {self.source_prefix}* packages checked")
        crossings = []
        for source in sources:
            for imported in sorted(graph.find_modules_directly_imported_by(source)):
                if (imported == target or imported.startswith(target + ".")) and imported not in public:
                    lines = graph.get_import_details(importer=source, imported=imported)
                    where = ", ".join(f"line {detail['line_number']}" for detail in lines) or "?"
                    crossings.append(f"{source} imports {imported} ({where})")
        return ContractCheck(kept=not crossings, metadata={"crossings": crossings})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for crossing in check.metadata["crossings"]:
            output.print_error(crossing)
        output.new_line()
        output.print_error("Import the name from `rlf` or a documented module (docs/reference/api.md) instead, "
                           "or make the module public and document it.")
        output.new_line()


if __name__ == "__main__":
    from importlinter.cli import lint_imports_command

    lint_imports_command()
