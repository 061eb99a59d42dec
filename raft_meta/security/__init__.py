"""Security metadata: ACLs and the authorizer, principal mapping, SCRAM credentials."""
