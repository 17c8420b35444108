// Package gateway holds what the binary carries from the repository's top
// level: the example persona in config/, which `gateway init` writes into
// a new CONFIG_DIR.
package gateway

import "embed"

// ExamplePersona is the example persona, at config/<file>. memory.md is
// left out: the repository's config/ is also a working CONFIG_DIR (the
// quick start runs there), so what an agent remembered must not end up in
// a binary built from it; boot.md has memory.md created empty instead.
//
//go:embed config/boot.md config/soul.md config/identity.md config/agents.md
//go:embed config/user.md config/tools.md config/heartbeat.md
var ExamplePersona embed.FS
