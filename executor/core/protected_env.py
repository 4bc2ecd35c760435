"""Environment variables a repository's hook may not set: those that decide which bytes run (pure).

Where programs, libraries, modules, start-up files and configuration are
looked up, or what a tool runs for you: the review hashes the files a command
names, not what these would bring in. User and managed hooks may set them.
:func:`protected_env_name` says why for one name; the hook parser
(:func:`executor.core.hooks.parse_handler`) refuses them in project and local
scope.
"""

from __future__ import annotations

from executor.core.envnames import PROJECT_DIR_VARS

# Environment variables that decide which bytes run: where programs, libraries,
# modules, start-up files and configuration are looked up, or what a tool runs
# for you. A repository's hook may not set them (user and managed hooks may):
# the review hashes the files a command names, not what these would bring in.
# Matched on the upper-cased name.
_PROTECTED_ENV = {
    # hookcage's own values, always set by hookcage
    **{name: "hookcage sets it to the project root" for name in PROJECT_DIR_VARS},
    "CLAUDE_ENV_FILE": "hookcage sets it",
    "HOME": "it moves the start-up and configuration files programs read",
    "PATH": "it decides which program a command name runs",
    # shells
    "SHELL": "programs run it", "ENV": "sh runs the file it names", "BASH_ENV": "bash runs the file it names",
    "CDPATH": "it changes where cd goes", "GLOBIGNORE": "it changes what globs expand to",
    "SHELLOPTS": "it changes how bash runs", "BASHOPTS": "it changes how bash runs",
    "IFS": "it changes how the shell splits words", "PS4": "bash expands it when tracing",
    "PROMPT_COMMAND": "bash runs it", "FPATH": "it decides where functions are loaded from",
    "ZDOTDIR": "zsh runs the files it names", "INPUTRC": "it names a file readline loads",
    "PWD": "it changes where the shell thinks it is", "OLDPWD": "it changes where cd - goes",
    # interpreters and their module paths
    "PERL5LIB": "it adds Perl module paths", "PERLLIB": "it adds Perl module paths",
    "PERL5OPT": "it adds Perl options", "PERL5DB": "it names code Perl runs",
    "RUBYLIB": "it adds Ruby library paths", "RUBYOPT": "it adds Ruby options",
    "CLASSPATH": "it decides which Java classes load", "JAVA_TOOL_OPTIONS": "it adds JVM options",
    "_JAVA_OPTIONS": "it adds JVM options", "JDK_JAVA_OPTIONS": "it adds JVM options",
    "TCLLIBPATH": "it adds Tcl library paths", "PHPRC": "it names php.ini",
    "PHP_INI_SCAN_DIR": "it names PHP configuration", "VIRTUAL_ENV": "it selects a Python environment",
    "R_PROFILE": "R runs the file it names", "R_PROFILE_USER": "R runs the file it names",
    "R_LIBS": "it adds R library paths", "R_LIBS_USER": "it adds R library paths",
    "GOFLAGS": "it adds go options", "GOPATH": "it moves Go's code", "GOROOT": "it moves Go's code",
    "GOENV": "it names Go's configuration", "GOTOOLCHAIN": "it selects the Go toolchain",
    "RUSTC_WRAPPER": "cargo runs it", "RUSTC": "cargo runs it",
    # the C library, OpenSSL, terminals
    "GCONV_PATH": "the C library loads code from it", "LOCPATH": "the C library loads locales from it",
    "NLSPATH": "the C library loads catalogs from it", "GLIBC_TUNABLES": "it changes the C library",
    "HOSTALIASES": "it changes name lookups", "OPENSSL_CONF": "OpenSSL loads modules it names",
    "OPENSSL_ENGINES": "OpenSSL loads code from it", "OPENSSL_MODULES": "OpenSSL loads code from it",
    "TERMINFO": "it names terminal descriptions", "TERMINFO_DIRS": "it names terminal descriptions",
    # programs that run other programs or read configuration
    "PAGER": "programs run it", "MANPAGER": "programs run it", "EDITOR": "programs run it",
    "VISUAL": "programs run it", "BROWSER": "programs run it", "SSH_ASKPASS": "programs run it",
    "SUDO_ASKPASS": "programs run it", "CURL_HOME": "curl reads its configuration there",
    "WGETRC": "wget reads the configuration it names", "MAKEFLAGS": "it adds make options",
    "MFLAGS": "it adds make options", "GNUMAKEFLAGS": "it adds make options",
    "MAKEFILES": "make reads the files it names", "CONFIG_SITE": "configure runs the files it names",
}
_PROTECTED_ENV_PREFIXES = (
    ("LD_", "the dynamic loader reads it"), ("DYLD_", "the dynamic loader reads it"),
    ("PYTHON", "Python reads it (module paths, start-up files)"),
    ("NODE_", "Node reads it (module paths, options)"), ("NPM_CONFIG_", "npm reads it"),
    ("YARN_", "yarn reads it"), ("PNPM_", "pnpm reads it"), ("BUN_", "bun reads it"),
    ("DENO_", "deno reads it"), ("UV_", "uv reads it"), ("PIP_", "pip reads it"),
    ("CONDA", "conda reads it"), ("GIT_", "git reads it (configuration, programs it runs)"),
    ("PERL", "Perl reads it"), ("RUBY", "Ruby reads it"), ("GEM_", "Ruby reads it"),
    ("BUNDLE_", "bundler reads it"), ("LUA_", "Lua reads it (module paths, start-up code)"),
    ("CARGO_", "cargo reads it"), ("RUSTUP_", "rustup reads it"),
    ("XDG_", "it moves the configuration files programs read"),
    ("BASH_FUNC_", "bash imports functions from it"), ("HOOKCAGE_", "hookcage's own"),
    ("LESS", "less runs the programs it names"),
)


def protected_env_name(name: str) -> str | None:
    """Why a repository's hook may not set the environment variable ``name`` (``None``: it may).

    The names that decide which bytes run: the project-directory variables,
    ``PATH``, ``HOME``, the loader's ``LD_*``, interpreters' module paths and
    start-up files (``PYTHON*``, ``NODE_*``, ``PERL5LIB``...), files shells run
    (``BASH_ENV``, ``ENV``), programs tools run for you (``PAGER``,
    ``GIT_*``), package managers' settings (``UV_*``, ``npm_config_*``).
    """
    upper = name.upper()
    why = _PROTECTED_ENV.get(upper)
    if why is not None:
        return why
    for prefix, reason in _PROTECTED_ENV_PREFIXES:
        if upper.startswith(prefix):
            return reason
    return None
