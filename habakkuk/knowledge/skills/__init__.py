"""Skills: SKILL.md folders an agent loads when a task fits, or when a user names one.

types.py holds the values and the `SkillsAccess` Protocol every surface and tool uses.
"""
