"""The skill scan: reads every file of a skill and says clean, caution or dangerous.

Installs (hub), plugins and skill_save call :func:`scan_folder` / :func:`scan_files`; both
are pure and synchronous (callers run them in a thread) and read nothing but the files
given. The verdict is "dangerous" if any finding is dangerous, "caution" if any is a
caution, else "clean"; every finding names its rule, file and line (ScanReport.reasons).

It reads what it scans rather than matching text alone:

* shell (``*.sh``, shebangs, fenced sh/bash/console blocks, ``$ `` lines and inline code in
  Markdown) is parsed with :mod:`habakkuk.tools.shell_syntax`, judged by the hardline
  blocklist, then walked through variables, aliases, substitutions, ``eval``, here-docs
  (:mod:`~habakkuk.knowledge.scan.shell`);
* Python is read with ``ast``, imports and aliases resolved and built strings folded
  (:mod:`~habakkuk.knowledge.scan.python_code`);
* Markdown: fences by language, command-like prose, archive passwords, payload links,
  hidden instructions (:mod:`~habakkuk.knowledge.scan.markdown`);
* everything else: regex rules that stay linear on hostile input
  (:mod:`~habakkuk.knowledge.scan.text_rules`); binaries by their magic.

Severity. **Dangerous**: it runs remote or obfuscated code (a download or decoded data
into a shell or interpreter, ``exec`` of decoded or built strings, ``importlib`` of built
names, PowerShell ``iex`` of a web request or ``-EncodedCommand``), exfiltrates (a
credential file or the environment read where the network is written to; prose that names
someone's secrets and tells the agent to send them, or to keep something from the user),
opens a reverse or bind shell in any language (a socket on a shell's stdin/stdout, a shell
piped to and from ``nc``), escalates (``sudo``/``doas``/``su`` of anything but a package or
service manager, setuid), persists or writes outside the folder where it matters (shell rc
files, ``~/.ssh``, crontab, launchd, systemd, /etc and the system folders), destroys (the
hardline blocklist, and the home or root deleted recursively through any language's API),
hides (password-protected archives, bidi overrides, Unicode tag characters, instructions in
HTML comments, Gatekeeper bypasses), gives orders in a frontmatter field (which reaches
every system prompt), points at payload hosts (paste sites, URL shorteners, raw
public IPs, links to .exe/.dmg/.pkg/.msi/.AppImage), or ships an executable, an archive or
an unreadable binary. **Caution**: softer signals a reviewer should see: ``sudo`` of a
package manager, credential files read without a send, writes elsewhere in the home or
outside the folder, a command or ``eval`` built at run time, text piped into a shell from
a file, ``ctypes``, ``pickle.loads``, Python that does not parse, long base64/hex blobs
outside a fenced data block, zero-width characters, minified code, images and PDFs (not
read). Plain everyday content (``pip install``, ``git clone``, ``curl -o file URL``,
``subprocess.run(["git", "status"])``, ``requests.get`` of an API, links to docs) has no
finding at all.

What the scan says goes to the user (install, `skills show`); the agent is only told that
a skill_save was refused (ScanRefused), never which rule matched.
"""

from habakkuk.knowledge.scan.files import scan_files, scan_folder

__all__ = ["scan_files", "scan_folder"]
