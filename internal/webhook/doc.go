// Package webhook is the gateway's HTTP intake: POST /hooks/{name} turns an
// authenticated request into a webhook event in the queue.
//
// A request is authenticated with the webhook's shared secret, either as a
// GitHub-style HMAC-SHA256 signature of the raw body (X-Signature-256:
// sha256=<hex>) or as Authorization: Bearer <secret>; both are compared in
// constant time. The secret is looked up by the environment variable name
// agents.md gives, through an injected function, and never logged; neither
// is the body. The payload reaches the agent inside a delimited block marked
// as untrusted data (Render), never as instructions.
//
// Webhook definitions are looked up per request, so a reload of agents.md
// applies to the next request. A Handler is safe for concurrent use.
package webhook
