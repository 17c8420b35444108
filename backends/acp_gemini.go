package backends

import (
	"context"
	"os"
	"slices"
)

// useACP reports whether a gemini or opencode turn runs over ACP: when the
// agent must be able to ask for approvals, or its process may be kept. A
// turn with neither (AGENT_KEEP_ALIVE=0, `gateway chat`) is one headless
// run as before.
func useACP(warm WarmOptions, req Request) bool {
	return warm.Interactive && (req.Approve != nil || (req.Key != "" && warm.KeepAlive > 0))
}

// acpGemini is the ACP adapter for `gemini --acp`, with the flags and the
// system prompt file of the headless runs.
func acpGemini(g *Gemini) *ACP {
	return newACP(geminiCLI, g.opts, func(ctx context.Context, req Request) (acpLaunch, error) {
		bin, err := g.binary()
		if err != nil {
			return acpLaunch{}, err
		}
		headless := req
		headless.SessionID = ""
		args, err := geminiArgs(headless)
		if err != nil {
			return acpLaunch{}, err
		}
		persona, err := geminiPersona(req)
		if err != nil {
			return acpLaunch{}, err
		}
		l := acpLaunch{Path: bin, Args: append([]string{"--acp"}, geminiACPFlags(args)...)}
		l.Settings = acpSettings(bin, l.Args, persona != "")
		if persona == "" {
			l.Env = FilterEnv(g.opts.Env, geminiEnvAllow, []string{"GEMINI_WRITE_SYSTEM_MD"})
			return l, nil
		}
		base, err := g.basePrompt(ctx, bin, req.WorkDir, args, g.opts.Log)
		if err != nil {
			if ctxErr := geminiContextError(ctx, nil); ctxErr != nil {
				return acpLaunch{}, ctxErr
			}
			g.opts.Log.Warn().Err(err).Msg("could not export gemini's built-in system prompt; using a short replacement")
			base = geminiFallbackPrompt
		}
		f, err := writeGeminiSystem(base + geminiPersonaHeader + persona)
		if err != nil {
			return acpLaunch{}, &Error{Kind: KindExecution, Message: "write system prompt file", Err: err}
		}
		if err := g.opts.share(f); err != nil {
			os.Remove(f)
			return acpLaunch{}, &Error{Kind: KindExecution, Message: "write system prompt file", Err: err}
		}
		// The file lives as long as the process: gemini reads it again for
		// every new or loaded session.
		l.Cleanup = func() { os.Remove(f) }
		l.SystemFile = f
		l.Env = append(FilterEnv(g.opts.Env, geminiEnvAllow, geminiEnvDeny), "GEMINI_SYSTEM_MD="+f)
		return l, nil
	})
}

// geminiACPFlags drops the headless-only flags (-p "", -o stream-json)
// from geminiArgs' command line.
func geminiACPFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if (args[i] == "-p" || args[i] == "-o") && i+1 < len(args) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return slices.Clip(out)
}
