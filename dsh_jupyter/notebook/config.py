"""Every user-facing notebook option, as a traitlet settable with ``%config`` or ``ipython_config.py``.

``%config DshMagics.model = "deepseek"`` and ``c.DshMagics.model = "deepseek"`` both work, and
``%config DshMagics`` lists every option with its help.
"""

from __future__ import annotations

from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode
from traitlets.config import Configurable

from ..traits import DsnUnicode, ModelPrices


class DshSettings(Configurable):
    """Options of the ``%%dsh`` magics and the notebook host."""

    sessions_dir = Unicode(
        "",
        help="Folder of the JSONL session store. Empty: `$DSH_SESSIONS_DIR` when set, else `.dsh/sessions` in the "
        "kernel's working directory (the notebook's folder).",
    ).tag(config=True)
    store = CaselessStrEnum(
        ["jsonl", "sqlite", "postgres"], default_value="jsonl",
        help="Session store: `jsonl` (one file per session beside the notebook), `sqlite` (one database file) or "
        "`postgres` (a PostgreSQL database shared by a team, see `postgres_dsn`).",
    ).tag(config=True)
    sqlite_path = Unicode(
        "", help="Database file when `store` is `sqlite`. Empty: `.dsh/sessions.sqlite` in the working directory."
    ).tag(config=True)
    postgres_dsn = DsnUnicode(
        "", help="PostgreSQL connection string when `store` is `postgres` (`postgresql://role@host/db`; its "
        "password is never shown or logged). Empty: `$DSH_POSTGRES_DSN`. Sessions belong to the DSN's role.",
    ).tag(config=True)
    dsh_home = Unicode(
        "", help="Harness home, given to tools and hooks as `DSH_HOME`. Empty: `$DSH_HOME` when set, else `~/.dsh`."
    ).tag(config=True)
    model = Unicode(
        "",
        help="Model spec: `offline`, `local`, `deepseek[:model]`, `openai:model`, `ollama:model`, a LiteLLM id "
        "such as `anthropic/claude-sonnet-4-5` (extra `dsh-jupyter[litellm]`), or a model name served at "
        "`base_url` (`%dsh models` lists them). Empty: DeepSeek when `$DEEPSEEK_API_KEY` is set, else "
        "the offline model.",
    ).tag(config=True)
    base_url = Unicode(
        "", help="Base URL of any OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, ...)."
    ).tag(config=True)
    api_key_env = Unicode(
        "", help="Name of the environment variable holding the endpoint's API key (the key itself is never stored). "
        "Empty: the model's usual variable, or no key for `base_url` servers."
    ).tag(config=True)
    context_window = Int(
        0, help="Context window of the model in tokens. 0: the known value for the model, if any."
    ).tag(config=True)
    model_images = CaselessStrEnum(
        ["auto", "yes", "no"], default_value="auto",
        help="Whether the model is sent images (plots from tools) as images: `yes`, `no` (a text description "
        "instead), or `auto`: the known value for the model (gpt-4o, vision models of local servers, ...); "
        "other names, such as a `base_url` server's, get descriptions.",
    ).tag(config=True)
    model_prices = ModelPrices(
        help="What models cost, in US dollars per million tokens, for self-hosted endpoints or to correct the "
        "known prices: `{'my-model': {'input': 0.5, 'output': 1.5, 'cached': 0.1}}`, or `{'my-model': 0}` for a "
        "free one (the footer then says free). Keys are model specs as `--model` takes them. A model with no "
        "known price shows no cost.",
    ).tag(config=True)
    placement = CaselessStrEnum(
        ["separate", "prompt-prefix"], default_value="separate",
        help="Where referenced-session snapshots go: `separate` (their own message before the prompt) or "
        "`prompt-prefix` (one message: snapshots, `## My request:`, prompt).",
    ).tag(config=True)
    max_references = Int(3, help="Most sessions one prompt may reference (hard maximum 3).").tag(config=True)
    max_reference_bytes = Int(
        0, help="Byte budget per referenced session. 0: automatic, from the model's context window (at least 65,536; "
        "less for small local models, so a reference fits their window)."
    ).tag(config=True)
    reference_context_fraction = Float(
        0.2, help="Share of the context window (at 4 bytes a token) the automatic budget may use per reference."
    ).tag(config=True)
    candidate_limit = Int(
        50, help="Most sessions offered by completion, the picker and `%dsh sessions` (without `--limit`)."
    ).tag(config=True)
    catalog = Bool(
        True, help="Index the sessions of every notebook folder in `$DSH_HOME/catalog.sqlite`, so completion, the "
        "picker and `%dsh sessions` find them at keystroke speed, body search included (off: only this folder's "
        "store is read)."
    ).tag(config=True)
    foreign_sessions = Bool(
        True, help="List and reference the sessions of other tools on this machine, read-only: Claude Code "
        "transcripts (`$CLAUDE_CONFIG_DIR` or `~/.claude`) and Codex rollouts (`$CODEX_HOME` or `~/.codex`).",
    ).tag(config=True)
    python_tool = Bool(True, help="Let the agent run Python in this kernel's namespace.").tag(config=True)
    variables_tool = Bool(
        True, help="Let the agent read summaries of the notebook's variables (the `variables` tool: data frames' "
        "shape, dtypes, nulls and first rows; other values clipped).",
    ).tag(config=True)
    notebook_tools = Bool(
        True, help="Let the agent read this notebook's cells and outputs (`notebook_read`), insert, replace or "
        "delete cells (`notebook_edit`, reverted with `%dsh undo`) and run cells (`notebook_run`). In JupyterLab "
        "and Notebook 7 it sees the live notebook; elsewhere the kernel's record of the cells that ran.",
    ).tag(config=True)
    bash_tool = Bool(True, help="Let the agent run bash commands in the notebook's folder.").tag(config=True)
    bash_timeout = Float(120.0, help="Seconds before a foreground bash command of the agent is stopped.").tag(
        config=True
    )
    approval = CaselessStrEnum(
        ["ask", "auto", "read-only"], default_value="ask",
        help="Whether the agent asks before a tool that can change something runs (bash, python): `ask` shows "
        "the exact command with Allow / Deny in the running cell (with nobody to answer, the call is refused), "
        "`auto` runs them without asking, `read-only` refuses them. Reading tools never ask.",
    ).tag(config=True)
    approval_timeout = Float(
        120.0, help="Seconds a question waits for an answer before the call is refused."
    ).tag(config=True)
    interpolate = Bool(
        True, help="Replace `{name}` in `%%dsh` prompts with values from the notebook namespace."
    ).tag(config=True)
    show_reasoning = Bool(False, help="Show the model's reasoning in cell output (hidden by default).").tag(
        config=True
    )
    stream_rate = Float(20.0, help="Most display updates a second while an answer streams.").tag(config=True)
    auto_compact_fraction = Float(
        0.8, help="Compact automatically when a request would pass this share of the context window (0: never)."
    ).tag(config=True)
    max_steps = Int(25, help="Most model steps in one turn.").tag(config=True)
    model_titles = Bool(True, help="Ask the model for a short session title after the first turn.").tag(config=True)
    claude_hooks = Unicode(
        "", help="Path to a Claude Code `settings.json` whose command hooks run for this notebook's sessions."
    ).tag(config=True)
    codex_hooks = Unicode(
        "", help="Path to a Codex `hooks.json` whose command hooks run for this notebook's sessions."
    ).tag(config=True)
    warm_up = Bool(
        True, help="After `%load_ext`, import what the first prompt needs in a background thread (while you type), "
        "so the first `%%dsh` turn is as quick as later ones. Read when the loading cell ends.",
    ).tag(config=True)
    export_env = Bool(
        True, help="Give the kernel (`os.environ`, `!` and `%%bash` cells) the current session's `DSH_SESSION_ID` "
        "and `DSH_HOME` on every store, and `DSH_SESSION_JSONL` when the session has a file; inherited values of "
        "those names are removed. Off: the kernel's own values are put back."
    ).tag(config=True)
    system_prompt = Unicode("", help="System prompt for the agent. Empty: the built-in one.").tag(config=True)
    mcp_servers = Dict(
        help="MCP servers for the agent, in the `mcpServers` shape of Claude Code's `.mcp.json`: "
        "`{\"notes\": {\"command\": \"uvx\", \"args\": [\"notes-mcp\"]}}` (stdio) or `{\"url\": ..., "
        "\"headers\": {...}}` (Streamable HTTP), `\"disabled\": true` to turn one off. Merged over the user file "
        "and the project file (a server named here wins); see docs/mcp.md.",
    ).tag(config=True)
    mcp_config_file = Unicode(
        "", help="The user's MCP configuration (`{\"mcpServers\": {...}}`). Empty: `mcp.json` in the harness home "
        "(`~/.dsh/mcp.json`)."
    ).tag(config=True)
    mcp_project_file = Unicode(
        ".mcp.json", help="The project's MCP configuration, relative to the notebook's folder (Claude Code's "
        "`.mcp.json`); its servers win over the user file's. Empty: no project file is read."
    ).tag(config=True)
    mcp_connect_timeout = Float(
        30.0, help="Seconds an MCP server may take to start and list its tools before the prompt goes on without it."
    ).tag(config=True)
    mcp_call_timeout = Float(
        120.0, help="Seconds one MCP tool call may take before it is cancelled and the agent told so."
    ).tag(config=True)
    mcp_stdio_command_allowlist = List(
        Unicode(), default_value=None, allow_none=True,
        help="Commands stdio MCP servers may run (an admin setting, e.g. in /etc/ipython/ipython_config.py): a "
        "name (`uvx`) allows that command as written, a path allows that program. None: any command.",
    ).tag(config=True)
