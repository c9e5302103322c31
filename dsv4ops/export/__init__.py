"""Export a profile to other orchestrators: an SGLang RoleBasedGroup for Kubernetes."""
