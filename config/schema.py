"""The config format (DESIGN.md, "The config") as pydantic models.

One YAML document holds ``test_suite_config``; a config is one such file or a directory
of them (one per upstream test file, by convention). ``testcurator schema`` prints the JSON
Schema of :class:`ConfigDocument` for editors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from testcurator.installed import dtype_names
from testcurator.names import is_generic_name
from testcurator.vocab import Mode, op_at

SCHEMA_VERSION = 1


def _check_generic_name(name: str) -> str:
    if not is_generic_name(name):
        raise ValueError(
            f"name {name!r} is not in Class::test form (device-generic, e.g. TestViewOps::test_contiguous_self;"
            " a module-level test function is named by itself, e.g. test_foo)"
        )
    # An instantiated name (TestFooCPU::test_bar_cpu_float32) is reported by the loader, which
    # knows the upstream file and can tell the right generic name (config/resolve.py).
    return name


GenericName = Annotated[str, AfterValidator(_check_generic_name)]


class _Strict(BaseModel):
    # Unknown keys are errors: a typo ("mdoe") must not silently mean "default".
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class DtypeRef(_Strict):
    name: str = Field(description="A torch dtype as PyTorch spells it in test names, e.g. float32, bfloat16, bool.")

    @field_validator("name")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in dtype_names():
            raise ValueError(f"unknown dtype {value!r} (expected a torch dtype name such as float32, bfloat16, int64, bool)")
        return value


class OpRef(_Strict):
    name: str = Field(description="An OpInfo name (add, nn.functional.relu) or its formatted test-name form (nn_functional_relu).")
    dtypes: list[DtypeRef] | None = Field(default=None, description="Dtypes this op supports; absent means every supported dtype.")

    def entries(self) -> tuple[str, ...]:
        """As an ``edits.ops.exclude`` item, a decision's ``exclude_ops`` entries: the op, or
        the op at each of its dtypes (``masked.std@complex64``)."""
        return (self.name,) if self.dtypes is None else tuple(op_at(self.name, d.name) for d in self.dtypes)


class ModuleRef(_Strict):
    name: str = Field(description="A ModuleInfo name, e.g. nn.Linear.")


class DtypeEdits(_Strict):
    exclude: list[DtypeRef] = Field(default_factory=list)
    include: list[DtypeRef] = Field(default_factory=list, description="Coverage upstream's @dtypes does not list.")


class OpEdits(_Strict):
    exclude: list[OpRef] = Field(default_factory=list)


class ModuleEdits(_Strict):
    exclude: list[ModuleRef] = Field(default_factory=list)


class ParamRef(_Strict):
    name: str = Field(description="A @parametrize argument of the test, e.g. shape, reduction, inplace.")
    values: list[str | bool | int | float] = Field(
        min_length=1,
        description="Values to exclude, as they appear in instance names (2x3, mean, True, 0_5) or as Python "
        "literals of the live value ((2, 3), 'mean').")


class ParamEdits(_Strict):
    exclude: list[ParamRef] = Field(default_factory=list)


class Edits(_Strict):
    dtypes: DtypeEdits | None = None
    ops: OpEdits | None = None
    modules: ModuleEdits | None = None
    params: ParamEdits | None = Field(default=None, description="Exclusions by @parametrize value (any argument).")


class TestEntry(_Strict):
    names: list[GenericName] = Field(min_length=1, description="Device-generic Class::test names, matched exactly.")
    mode: Mode
    edits: Edits | None = None
    reason: str | None = Field(default=None, description="Optional reason; the pipeline writes reasons as a comment above the entry.")


class Capabilities(_Strict):
    supported_dtypes: list[DtypeRef] | None = None
    supported_ops: list[OpRef] | None = None


class FileEntry(_Strict):
    path: str = Field(description="Upstream test file; ${TORCH_ROOT} and any ${VAR} expand; relative paths resolve against the torch root.")
    unlisted_test_mode: Mode = Field(default="skip", description="Outcome of every test of this file that no entry lists.")
    global_: Capabilities | None = Field(default=None, alias="global", description="Overrides the top-level capabilities, field by field, for this file.")
    labels: list[str] = Field(default_factory=list, description="Labels of this file, beside its document's; --curate-labels selects by them.")
    tests: list[TestEntry] = Field(default_factory=list)


class SuiteConfig(_Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    labels: list[str] = Field(default_factory=list, description="Labels of every file this document lists; --curate-labels selects by them.")
    global_: Capabilities | None = Field(default=None, alias="global")
    unlisted_file_mode: Mode = Field(default="skip", description="Outcome of every test in a collected file that no files entry lists.")
    files: list[FileEntry] = Field(default_factory=list)


class ConfigDocument(_Strict):
    test_suite_config: SuiteConfig


def json_schema() -> dict[str, object]:
    """The JSON Schema of one config document (by alias, as written in YAML)."""
    return ConfigDocument.model_json_schema(by_alias=True)
