"""Unpacking into staging: links, devices, escaping paths and bombs are refused; modes dropped."""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from habakkuk.knowledge.hub.treehash import tree_hash
from habakkuk.knowledge.hub.unpack import Limits, UnpackRefused, copy_folder, unpack_archive

MB = 1 << 20


def tar_gz(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def file_info(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def written_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_tarball_unpacks_with_its_top_folder_stripped_and_no_executable_bit(
    tmp_path: Path,
) -> None:
    archive = tar_gz(
        tmp_path / "a.tgz",
        [
            file_info("acme-skills-abc1234/weekly/SKILL.md", b"---\nname: weekly\n---\nhi\n"),
            file_info("acme-skills-abc1234/weekly/run.sh", b"echo hi\n", mode=0o755),
            file_info("acme-skills-abc1234/other/SKILL.md", b"other\n"),
        ],
    )
    got = unpack_archive(archive, tmp_path / "out", strip_top=True, only="weekly")
    assert got.folder == tmp_path / "out" / "weekly"
    assert sorted(p.name for p in got.folder.iterdir()) == ["SKILL.md", "run.sh"]
    assert not (tmp_path / "out" / "other").exists()
    assert (got.files, got.bytes) == (2, len(b"---\nname: weekly\n---\nhi\n") + 8)
    script = stat.S_IMODE((got.folder / "run.sh").stat().st_mode)
    assert script == 0o600
    assert stat.S_IMODE(got.folder.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("member", "said"),
    [
        (special("top/s/link", tarfile.SYMTYPE, "/etc/passwd"), "a link; refused"),
        (special("top/s/hard", tarfile.LNKTYPE, "top/s/SKILL.md"), "a link; refused"),
        (special("top/s/dev", tarfile.CHRTYPE), "a device, FIFO or other special file"),
        (special("top/s/fifo", tarfile.FIFOTYPE), "a device, FIFO or other special file"),
        (file_info("top/s/../../evil", b"x"), "a path with `..`"),
        (file_info("/etc/evil", b"x"), "an absolute path"),
    ],
)
def test_links_devices_and_escaping_paths_refuse_the_whole_archive(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None], said: str
) -> None:
    archive = tar_gz(tmp_path / "a.tgz", [file_info("top/s/SKILL.md", b"hi\n"), member])
    with pytest.raises(UnpackRefused, match=re.escape(said)):
        unpack_archive(archive, tmp_path / "out", strip_top=False)
    assert not (tmp_path / "evil").exists()


def test_a_symlink_elsewhere_in_a_repository_does_not_refuse_the_folder_asked_for(
    tmp_path: Path,
) -> None:
    archive = tar_gz(
        tmp_path / "a.tgz",
        [
            file_info("top/wanted/SKILL.md", b"hi\n"),
            special("top/docs/link", tarfile.SYMTYPE, "/etc/passwd"),
        ],
    )
    got = unpack_archive(archive, tmp_path / "out", strip_top=True, only="wanted")
    assert [p.name for p in got.folder.iterdir()] == ["SKILL.md"]


def test_a_header_declaring_a_terabyte_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    info = tarfile.TarInfo("top/huge.bin")
    info.size = 10**12
    # Only the header: the data a real bomb would decompress never has to exist.
    (tmp_path / "bomb.tgz").write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT)))
    with pytest.raises(UnpackRefused, match=r"the archive declares more than \d+ bytes"):
        unpack_archive(tmp_path / "bomb.tgz", tmp_path / "out")
    assert written_bytes(tmp_path / "out") == 0


def test_an_archive_bomb_stops_at_the_limit_without_filling_the_disk(tmp_path: Path) -> None:
    zeros = bytes(2 * MB)
    archive = tar_gz(tmp_path / "bomb.tgz", [file_info(f"top/f{i}", zeros) for i in range(8)])
    assert archive.stat().st_size < 100_000  # 16 MB of zeros compress to almost nothing
    limits = Limits(total_bytes=5 * MB)
    with pytest.raises(UnpackRefused, match="over the limit of 5242880 bytes in all"):
        unpack_archive(archive, tmp_path / "out", limits=limits)
    assert written_bytes(tmp_path / "out") <= 5 * MB


def test_more_files_than_the_limit_are_refused(tmp_path: Path) -> None:
    archive = tar_gz(tmp_path / "many.tgz", [file_info(f"top/f{i}", b"x") for i in range(30)])
    with pytest.raises(UnpackRefused, match="more than 20 files"):
        unpack_archive(archive, tmp_path / "out", limits=Limits(files=20))


def test_a_path_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    deep = "/".join(["d"] * 20) + "/f"
    archive = tar_gz(tmp_path / "deep.tgz", [file_info(deep, b"x")])
    with pytest.raises(UnpackRefused, match="deeper than 16 folders"):
        unpack_archive(archive, tmp_path / "out")


def test_a_zip_with_dotdot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("skill/SKILL.md", "hi\n")
        zf.writestr("skill/../../outside.txt", "gotcha\n")
    with pytest.raises(UnpackRefused, match=re.escape("a path with `..`; refused")):
        unpack_archive(path, tmp_path / "out")
    assert not (tmp_path / "outside.txt").exists()


def test_a_zip_symlink_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("skill/SKILL.md", "hi\n")
        info = zipfile.ZipInfo("skill/link")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnpackRefused, match="skill/link: a symbolic link; refused"):
        unpack_archive(path, tmp_path / "out")


def overlapping_zip(path: Path, copies: int) -> Path:
    """One entry of 4 MB of zeros, its central record repeated under other names, all
    pointing at the same bytes: the overlapping-entry bomb."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.txt", bytes(4 * MB))
    data = path.read_bytes()
    end = data.rindex(b"PK\x05\x06")
    (cd_size, cd_offset) = struct.unpack("<II", data[end + 12 : end + 20])
    record = data[cd_offset : cd_offset + cd_size]
    records = [record] + [
        record.replace(b"a.txt", f"{chr(98 + i % 20)}{i:03d}"[:5].encode().ljust(5, b"x"))
        for i in range(copies)
    ]
    body = data[:cd_offset] + b"".join(records)
    eocd = bytearray(data[end : end + 22])
    total = len(records)
    struct.pack_into("<HHII", eocd, 8, total, total, len(b"".join(records)), cd_offset)
    path.write_bytes(body + bytes(eocd))
    return path


def test_a_zip_whose_entries_overlap_is_refused(tmp_path: Path) -> None:
    path = overlapping_zip(tmp_path / "overlap.zip", copies=3)
    with pytest.raises(UnpackRefused, match="overlap; refused"):
        unpack_archive(path, tmp_path / "out")
    assert written_bytes(tmp_path / "out") == 0


def test_a_zip_declaring_more_than_the_archive_limit_is_refused(tmp_path: Path) -> None:
    path = overlapping_zip(tmp_path / "overlap.zip", copies=40)
    with pytest.raises(UnpackRefused, match="declares more than"):
        unpack_archive(path, tmp_path / "out", limits=Limits(archive_bytes=100 * MB))
    assert written_bytes(tmp_path / "out") == 0


def test_an_encrypted_zip_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "locked.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("SKILL.md", "hi\n")
    data = bytearray(path.read_bytes())
    # Set the "encrypted" flag in both the local header and the central record.
    data[6] |= 1
    cd = data.rindex(b"PK\x01\x02")
    data[cd + 8] |= 1
    path.write_bytes(bytes(data))
    with pytest.raises(UnpackRefused, match="password-protected"):
        unpack_archive(path, tmp_path / "out")


def test_something_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.tgz").write_bytes(b"this is not an archive at all" * 40)
    with pytest.raises(UnpackRefused, match=r"not a tar or zip archive|damaged"):
        unpack_archive(tmp_path / "x.tgz", tmp_path / "out")


def test_a_local_folder_is_copied_without_git_or_executable_bits(tmp_path: Path) -> None:
    source = tmp_path / "skill"
    (source / ".git").mkdir(parents=True)
    (source / ".git" / "HEAD").write_text("ref\n")
    (source / "SKILL.md").write_text("hi\n")
    (source / "run.sh").write_text("echo\n")
    os.chmod(source / "run.sh", 0o755)
    got = copy_folder(source, tmp_path / "out")
    assert sorted(p.name for p in got.folder.iterdir()) == ["SKILL.md", "run.sh"]
    assert stat.S_IMODE((got.folder / "run.sh").stat().st_mode) == 0o600


def test_a_local_folder_with_a_symlink_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "skill"
    source.mkdir()
    (source / "SKILL.md").write_text("hi\n")
    (source / "secret").symlink_to("/etc/passwd")
    with pytest.raises(UnpackRefused, match="secret: a symbolic link; refused"):
        copy_folder(source, tmp_path / "out")


def test_the_tree_hash_depends_on_paths_and_contents_only(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        (folder / "scripts").mkdir(parents=True)
        (folder / "SKILL.md").write_text("hi\n")
        (folder / "scripts" / "x.py").write_text("print(1)\n")
    os.chmod(b / "SKILL.md", 0o600)
    os.utime(b / "SKILL.md", (0, 0))
    first = tree_hash(a)
    assert first.startswith("sha256:") and len(first) == 7 + 64
    assert tree_hash(b) == first
    (b / "scripts" / "x.py").write_text("print(2)\n")
    assert tree_hash(b) != first
    (b / "scripts" / "x.py").rename(b / "scripts" / "y.py")
    assert tree_hash(b) != first
