"""The controller: `controller_decisions` (pure: placements, ISR changes, elections,
registrations) and the shell that turns RPCs into metadata records; reassignment, leader balance,
unregistration, config and quota decisions."""
