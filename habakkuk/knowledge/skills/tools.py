"""The skills toolset: skill_view, skill_file, skill_save and skill_search.

Every tool works on the skills the calling agent sees (`ctx.agent`: its own and the
shared ones); no argument names an agent. The tools hold the skills (a `SkillsAccess`)
the runtime built them with (engine/toolkit/service_tool.py). skill_save is an own-state
tool like memory_save: it only writes the agent's own folder, so workspace mode runs it
without asking, read-only denies it and ask mode asks; in a turn that read outside
content every mode asks. A refused or failed call (no such
skill, a path out of the folder, the scan's refusal) is an error result, never a failed
turn.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from habakkuk.engine.agent.prompt import PromptSkill, skill_line
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext
from habakkuk.engine.toolkit.service_tool import ServiceTool
from habakkuk.knowledge.memory_types import Provenance
from habakkuk.knowledge.skills.types import SkillsAccess, SkillSummary

_NAME = {"type": "string", "minLength": 1, "maxLength": 64}


class SkillTool(ServiceTool[SkillsAccess]):
    """What the skills tools share: the skills, errors (NotFound, ScanRefused,
    SecretRefused, bad input) as results."""

    unavailable: ClassVar[str] = "the skills are not available in this run"

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("name", ""))[:64]

    @abstractmethod
    async def act(self, skills: SkillsAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        """Do the work; the text the model reads."""


def _line(skill: SkillSummary) -> str:
    """A skill as the # Skills section lists it (an untrusted description quoted)."""
    return skill_line(PromptSkill(skill.name, skill.description, untrusted=not skill.trusted))


class SkillView(SkillTool):
    name = "skill_view"
    description = (
        "Load a skill by name: its instructions (SKILL.md) and the list of its supporting "
        "files (read one with skill_file). Load a skill before a task it covers, then "
        "follow it."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"name": _NAME},
        "required": ["name"],
        "additionalProperties": False,
    }

    async def act(self, skills: SkillsAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        skill = await skills.skill(ctx.agent, str(args["name"]).strip(), record_use=True)
        summary = skill.summary
        head = f"# Skill {skill.name}\n{summary.description}\n(source: {summary.source})"
        files = (
            "Supporting files (skill_file reads one):\n" + "\n".join(f"- {f}" for f in skill.files)
            if skill.files
            else "No supporting files."
        )
        text = f"{head}\n\n{skill.body.strip()}\n\n{files}"
        return f"{skill.caution}\n\n{text}" if skill.caution else text


class SkillFile(SkillTool):
    name = "skill_file"
    description = (
        "Read one supporting file of a skill as text, by its path inside the skill's folder "
        "(as skill_view lists them). Paths leading out of the folder are refused."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"name": _NAME, "path": {"type": "string", "minLength": 1}},
        "required": ["name", "path"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return f"{args.get('name', '')}/{args.get('path', '')}"[:200]

    async def act(self, skills: SkillsAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        name = str(args["name"]).strip()
        skill = await skills.skill(ctx.agent, name)
        text = await skills.read_file(ctx.agent, name, str(args["path"]))
        return f"{skill.caution}\n\n{text}" if skill.caution else text


class SkillSearch(SkillTool):
    name = "skill_search"
    description = (
        "Find skills by words in their names and descriptions (name matches first); "
        "use it for skills the # Skills list leaves out. Load one with skill_view."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("query", ""))[:200]

    async def act(self, skills: SkillsAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        query = str(args["query"])
        found = await skills.search(ctx.agent, query, limit=int(args.get("limit", 10)))
        if not found:
            return f"no skills match {query.strip()!r}"
        return "\n".join(_line(skill) for skill in found)


class SkillSave(SkillTool):
    name = "skill_save"
    description = (
        "Save a skill of your own: a short name (lower-case letters, digits, dashes), a "
        "one-line description of when to use it, and the instructions in Markdown. Saving "
        "an existing name replaces your copy (the previous one is kept). Improve the skill "
        "that covers a task rather than adding a near-duplicate. Skills that look like they "
        "could run or fetch something harmful, and secrets, are refused."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": _NAME,
            "description": {"type": "string", "minLength": 1, "maxLength": 1024},
            "body": {"type": "string", "minLength": 1},
        },
        "required": ["name", "description", "body"],
        "additionalProperties": False,
    }
    risk: ClassVar[Risk] = Risk.WRITE
    own_state: ClassVar[bool] = True
    asks_when_tainted: ClassVar[bool] = True  # outside content cannot write a skill unasked

    async def act(self, skills: SkillsAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        provenance = Provenance(
            by="agent", session=ctx.session, tool=self.name, tainted=ctx.taint.tainted
        )
        saved = await skills.save(
            ctx.agent,
            str(args["name"]).strip(),
            str(args["description"]),
            str(args["body"]),
            provenance=provenance,
        )
        name = saved.skill.name
        if saved.unchanged:
            return f"skill {name} already holds exactly that; nothing changed"
        where = f"agents/{ctx.agent}/skills/{name}/SKILL.md"
        if saved.created:
            return f"saved new skill {name} ({where})"
        return f"updated skill {name} ({where}; the previous version is SKILL.md.bak)"


def skills_tools(skills: SkillsAccess | None) -> list[Tool]:
    """The tools of the toolset `skills`, on `skills`."""
    return [SkillView(skills), SkillFile(skills), SkillSearch(skills), SkillSave(skills)]
