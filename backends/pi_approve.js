// The agent gateway's approval extension for pi (loaded with -e by the
// gateway's pi adapter, see backends/pi_approve.go).
//
// pi runs every enabled tool without asking. This extension asks the
// gateway before the tools named by --gateway-ask run, and before any
// write or edit inside a .pi folder (project extensions and settings that
// pi would load, with their code, at its next start). It asks through a
// select dialog of pi's RPC mode whose title carries the tool call as
// JSON; the gateway shows its approval buttons in Discord and answers:
//
//   "allow"          run it
//   "allow-session"  run it, and the same call for the process's life
//   "deny:<reason>"  block it; the model is told <reason>
//
// Anything else (the dialog cancelled, the turn stopped) blocks the call.
export default function (pi) {
	pi.registerFlag("gateway-ask", {
		description: "Comma-separated tools that wait for the agent gateway's approval",
		type: "string",
		default: "",
	});
	const remembered = new Set();

	pi.on("tool_call", async (event, ctx) => {
		const ask = String(pi.getFlag("gateway-ask") || "").split(",").filter(Boolean);
		const input = event.input || {};
		const path = typeof input.path === "string" ? input.path : "";
		const guarded = (event.toolName === "write" || event.toolName === "edit") && /(^|[\\/])\.pi([\\/]|$)/.test(path);
		if (!guarded && !ask.includes(event.toolName)) return undefined;

		// What "allow-session" covers: one command, one guarded path, or
		// every call of a file tool.
		let key = event.toolName;
		if (event.toolName === "bash") key += "\n" + String(input.command || "");
		if (guarded) key += "\n" + path;
		if (remembered.has(key)) return undefined;

		const title = "agent-gateway/approve " + JSON.stringify({ id: event.toolCallId, tool: event.toolName, input, guarded });
		const answer = await ctx.ui.select(title, ["allow", "allow-session", "deny"], { signal: ctx.signal });
		if (answer === "allow") return undefined;
		if (answer === "allow-session") {
			remembered.add(key);
			return undefined;
		}
		let reason = "The user did not approve this tool call.";
		if (typeof answer === "string" && answer.startsWith("deny:") && answer.length > 5) reason = answer.slice(5);
		return { block: true, reason };
	});
}
