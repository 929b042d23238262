"""`habakkuk talk`: talk with an agent through the microphone and the speakers.

Thin: it opens the runtime, picks the session, opens the audio devices and runs the
voice loop (habakkuk/voice/talk.py) with approvals at the keyboard. numpy and
sounddevice are imported only here, when talk runs, so `--help` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home, open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE, error_line, exit_code

if TYPE_CHECKING:
    from habakkuk.runtime import Runtime
    from habakkuk.voice.audio_io import Speaker
    from habakkuk.voice.speech_types import SpeechSynthesizer
    from habakkuk.voice.talk import FrameSource, TalkLoop, TalkSettings


def add_arguments(command: str, talk: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk talk`."""
    talk.add_argument("--agent", help="agent name (default: the first agent)")
    talk.add_argument("--session", help="continue this session")
    talk.add_argument(
        "--wake",
        metavar="PHRASES",
        help='answer only after a wake phrase, e.g. "hey habakkuk" (comma-separated; '
        "default: talk.wake)",
    )
    talk.add_argument(
        "--no-wake", action="store_true", help="every utterance is a request (talk.wake ignored)"
    )


def main(args: argparse.Namespace) -> int:
    """`habakkuk talk`: the voice loop until Ctrl-C."""
    if args.wake is not None and args.no_wake:
        print("habakkuk: talk: --wake and --no-wake cannot go together", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.suppress(KeyboardInterrupt):
        return run_async(talk(args))
    return EXIT_OK


async def talk(
    args: argparse.Namespace,
    *,
    started: Callable[[TalkLoop], None] = lambda loop: None,
) -> int:
    """Run the loop on the home's runtime until cancelled, speaking with the `tts:`
    provider; `started` is handed the loop once it listens."""
    from habakkuk.engine.errors import HabakkukError, NotFound
    from habakkuk.voice import audio_io
    from habakkuk.voice.speech import synthesizer_for

    runtime = await open_runtime(current_home())
    try:
        settings = _settings(runtime, args)
        if runtime.config.transcription is None:
            print(
                "habakkuk: talk: transcription: is not configured (an OpenAI-compatible "
                "endpoint: base_url, key_env, model; or offline: provider: local, model: DIR)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        try:
            session_id = await _session(runtime, args)
        except NotFound as exc:
            print(error_line("", exc), file=sys.stderr)
            return exit_code(exc)
        sd = audio_io.load_sounddevice()
        microphone = audio_io.Microphone(sd, runtime.config.talk.device)
        microphone.open()  # first: without a microphone there is nothing to talk about
        try:
            speaker = audio_io.open_speaker(sd, runtime.config.talk.player)
            synthesizer = synthesizer_for(runtime.config, runtime.env)
            await runtime.start_mcp()
            runtime.start_workers(channels=False)
            return await _converse(
                runtime, session_id, microphone, speaker, synthesizer, settings, started
            )
        finally:
            microphone.close()
    except HabakkukError as exc:
        print(error_line("talk", exc), file=sys.stderr)
        return exit_code(exc)
    finally:
        await runtime.close()


async def _converse(
    runtime: Runtime,
    session_id: str,
    microphone: FrameSource,
    speaker: Speaker,
    synthesizer: SpeechSynthesizer | None,
    settings: TalkSettings,
    started: Callable[[TalkLoop], None],
) -> int:
    import asyncio

    from habakkuk.cli.talk_keys import LineReader, answer_approvals
    from habakkuk.voice.audio_io import tone
    from habakkuk.voice.talk import TalkLoop
    from habakkuk.voice.transcription import transcribe

    transcription = runtime.config.transcription
    assert transcription is not None

    async def to_text(wav: bytes) -> str:
        return await transcribe(transcription, runtime.env, wav, "utterance.wav", "audio/wav")

    loop = TalkLoop(
        microphone=microphone,
        speaker=speaker,
        transcribe=to_text,
        turns=runtime.turns,
        session_id=session_id,
        synthesizer=synthesizer,
        settings=settings,
        tone=tone(),
        say=_say,
    )
    wake = " or ".join(f'"{p}"' for p in settings.wake)
    _say(f"· session {session_id}: listening" + (f" for {wake}" if wake else "") + " (Ctrl-C ends)")
    if synthesizer is None:
        _say("· tts: is not configured: replies are printed, not spoken")
    reader = LineReader()
    attending = reader.open()
    with contextlib.ExitStack() as stack:
        if attending:  # approvals need someone at the keyboard
            stack.enter_context(runtime.approvals.attach())
            stack.callback(reader.close)
        async with asyncio.TaskGroup() as tasks:
            if attending:
                tasks.create_task(
                    answer_approvals(runtime.bus, runtime.approvals, session_id, reader, _say)
                )
            started(loop)
            tasks.create_task(loop.run())
    return EXIT_OK


def _say(line: str) -> None:
    print(line, flush=True)


def _settings(runtime: Runtime, args: argparse.Namespace) -> TalkSettings:
    from habakkuk.voice.detector import DetectorSettings
    from habakkuk.voice.talk import TalkSettings
    from habakkuk.voice.wake import parse_phrases

    talk = runtime.config.talk
    if args.no_wake:
        wake: tuple[str, ...] = ()
    elif args.wake is not None:
        wake = parse_phrases(args.wake)
        if not wake:
            from habakkuk.engine.errors import BadInput

            raise BadInput('--wake: no phrase given (e.g. --wake "hey habakkuk")')
    else:
        wake = parse_phrases(",".join(talk.wake_phrases))
    tts = runtime.config.tts
    return TalkSettings(
        detector=DetectorSettings(threshold=talk.threshold, silence_s=talk.silence_seconds),
        wake=wake,
        follow_up_s=talk.follow_up_seconds,
        barge_in=talk.barge_in,
        max_chars=tts.max_chars if tts is not None else TalkSettings.max_chars,
    )


async def _session(runtime: Runtime, args: argparse.Namespace) -> str:
    if not args.session:
        return (await runtime.sessions.new_session(args.agent, origin="cli")).id
    session = await runtime.sessions.session(args.session)
    if args.agent and args.agent != session.agent:
        from habakkuk.engine.errors import BadInput

        raise BadInput(f"session {args.session} belongs to agent {session.agent!r}")
    return session.id
