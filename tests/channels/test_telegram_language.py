"""A chat speaks its channel's `language:` (else config.yaml's): commands, approval
prompts and their buttons, the yes/no words it reads, the errors a command's service
raises and the notices the work layer posts by itself (through the fake Bot API)."""

from __future__ import annotations

from habakkuk.runtime import Runtime
from habakkuk.work.schedule_types import FAILURE_NOTICE_AT, NewSchedule
from tests.channels import test_telegram_e2e as e2e
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import APPROVAL_SCRIPT, OpenRuntime, _prompt, _tool_result
from tests.helpers import eventually

start = e2e.start  # the same runtime with the tg channel (its `channel=` lines go under tg)


async def _ask(tg: FakeTelegram, text: str) -> str:
    """Send `text` and return the one reply it gets."""
    count = len(tg.texts())
    tg.message(text)
    await tg.wait_for(lambda: len(tg.texts()) > count)
    return tg.texts()[count]


async def _system_prompt(runtime: Runtime) -> str:
    [session] = await runtime.sessions.list_sessions()
    return session.system_prompt


async def test_a_french_channel_gets_help_and_an_approval_in_french_and_oui_approves(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace", channel="language: fr\n")
    help_ = await _ask(tg, "/help")
    assert "Commandes" in help_ and "/new — démarrer une nouvelle session" in help_
    status = await _ask(tg, "/status")
    assert "<b>Canal</b> tg : connecté depuis il y a" in status and "<b>Agent</b> main" in status
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    prompt = _prompt(tg).params
    assert "Approbation requise" in prompt["text"] and "Répondez" in prompt["text"]
    buttons = [b["text"] for row in prompt["reply_markup"]["inline_keyboard"] for b in row]
    assert buttons == ["✅ Approuver", "❌ Refuser", "Autoriser pour cette session"]
    tg.message("Oui !")
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert "approved-run" in await _tool_result(runtime)
    # The model is told which language was configured, for when it cannot tell.
    assert "French (fr)" in await _system_prompt(runtime)


async def test_the_deny_button_of_a_french_chat_is_acknowledged_in_french(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace", channel="language: fr\n")
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    prompt = _prompt(tg).params
    deny = prompt["reply_markup"]["inline_keyboard"][0][1]["callback_data"]
    tg.press(deny, message_id=tg.message_id_of(prompt["text"]))
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert (await _tool_result(runtime)).startswith("denied")
    [ack] = tg.of("answerCallbackQuery")
    assert ack.params["text"] == "Refusé"


async def test_a_pt_br_channel_speaks_portuguese(start: OpenRuntime, tg: FakeTelegram) -> None:
    await start(channel="language: pt-BR\n")
    assert await _ask(tg, "/stop") == "Nada está em execução."
    assert "Comando desconhecido /frobnicate" in await _ask(tg, "/frobnicate")


async def test_a_channel_without_a_language_speaks_config_yamls(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    await start(extra="language: de_DE.UTF-8\n")
    assert await _ask(tg, "/stop") == "Es läuft nichts."


async def test_a_channel_language_nobody_ships_falls_back_to_english(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    # The channel's own language wins over config.yaml's, even one without a catalog.
    await start(channel="language: tlh\n", extra="language: fr\n")
    assert await _ask(tg, "/stop") == "Nothing is running."


async def test_a_french_channel_gets_a_services_error_and_a_schedules_notice_in_french(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    runtime = await start(channel="language: fr\n")
    # The settings service raises it; the command layer shows it in the chat's language.
    said = await _ask(tg, "/think pondering")
    assert said.startswith("/think : niveau inconnu ") and "(niveaux : off, low" in said
    # /think made the session; nothing typed in it yet to rewind.
    assert "n'a aucun message de vous à rembobiner" in await _ask(tg, "/rewind 3")
    # A script schedule failing in a row: the runtime's own script runs post the notice.
    schedule = await runtime.schedules.add(
        NewSchedule(agent="main", name="digest", when="@daily", command="exit 2",
                    deliver_to="tg:42"),
        by="owner",
    )  # fmt: skip
    for _ in range(FAILURE_NOTICE_AT):
        job = await runtime.schedules.run_now(schedule.id)

        async def settled(job: str = job) -> bool:
            runs = await runtime.schedules.runs(schedule.id)
            return any(r.job == job and r.status not in ("queued", "running") for r in runs)

        await eventually(settled, what=f"the run {job} to settle")
    await tg.wait_for(lambda: any("digest" in text for text in tg.texts()))
    [notice] = [text for text in tg.texts() if "digest" in text]
    assert f"a échoué {FAILURE_NOTICE_AT} fois de suite" in notice, notice


async def test_a_french_channels_compact_outcome_comes_back_in_french(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    await start(channel="language: fr\n")
    assert await _ask(tg, "hello") == "echo: hello"
    # The compaction job runs in no one's language: it says it in the chat's.
    said = await _ask(tg, "/compact")
    assert said.startswith("Rien n'a été compacté : ") and said.endswith("dernier tour."), said
