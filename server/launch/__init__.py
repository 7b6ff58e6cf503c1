"""Launch files: the MaxText runs defined in shell scripts, Makefiles, Kubernetes manifests, XPK commands and
Markdown code blocks (issue 28), read statically and analysed as their YAML configs are."""
