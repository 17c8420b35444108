package backends

import (
	"context"
	"encoding/json"
	"strings"
)

// acpOpencode is the ACP adapter for `opencode acp`, with the
// configuration of the headless runs (OPENCODE_CONFIG_CONTENT,
// OPENCODE_PERMISSION) and the model in the configuration, as the acp
// command takes no --model.
func acpOpencode(o *Opencode) *ACP {
	return newACP(opencodeCLI, o.opts, func(_ context.Context, req Request) (acpLaunch, error) {
		bin := acpBinary(o.opts.Binary, "opencode")
		persona, err := geminiPersona(req)
		if err != nil {
			return acpLaunch{}, err
		}
		// The persona gets a file of the process's own: the runtime's file
		// goes with the turn, the process stays for the next.
		var promptFile string
		cleanup := func() {}
		if persona != "" {
			if promptFile, cleanup, err = o.run.tempFile("opencode-acp-system-*.md", persona); err != nil {
				return acpLaunch{}, err
			}
		}
		env, err := opencodeEnv(FilterEnv(o.opts.Env, opencodeEnvAllow, nil), req, promptFile)
		if err == nil && req.Model != "" {
			env, err = opencodeACPModel(env, req.Model)
		}
		if err != nil {
			cleanup()
			return acpLaunch{}, err
		}
		args := []string{"acp"}
		return acpLaunch{
			Path: bin, Args: args, Env: env, Cleanup: cleanup, SystemFile: promptFile,
			Settings: acpSettings(bin, args, persona != "", req.Model, req.PermissionMode, req.AllowedTools, req.MaxTurns),
		}, nil
	})
}

// opencodeACPModel sets "model" in OPENCODE_CONFIG_CONTENT.
func opencodeACPModel(env []string, model string) ([]string, error) {
	for i, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name != opencodeConfigContentEnv {
			continue
		}
		config, err := opencodeJSONObject(value, opencodeConfigContentEnv)
		if err != nil {
			return nil, err
		}
		config["model"] = model
		b, err := json.Marshal(config)
		if err != nil {
			return nil, &Error{Kind: KindExecution, Message: "encode " + opencodeConfigContentEnv, Err: err}
		}
		env[i] = opencodeConfigContentEnv + "=" + string(b)
		return env, nil
	}
	b, _ := json.Marshal(map[string]string{"model": model})
	return append(env, opencodeConfigContentEnv+"="+string(b)), nil
}
