"""The early-stopping rules, one module each, each declaring ``RULE = Rule(...)`` (``policies.policy.Rule``: its name,
params dataclass, stops function, policy class and what it says while waiting). ``policies.registry`` walks this
package (``training.extensions.declared``): a new rule is a new module here, nothing else (docs/architecture.md,
"Extension points")."""
