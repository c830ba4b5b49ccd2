"""Registered workflow type names: what the API starts, parents run as children, and operators filter by."""

BOT_DELETION_WORKFLOW = "BotDeletion"
ACCOUNT_DELETION_WORKFLOW = "AccountDeletion"
RECONCILER_WORKFLOW = "DeletionReconciler"
SITE_CREATION_WORKFLOW = "SiteCreationWorkflow"
SITE_DELETION_WORKFLOW = "SiteDeletionWorkflow"
ACCOUNT_EXPORT_WORKFLOW = "AccountExport"
DELETION_PREVIEW_WORKFLOW = "DeletionPreview"
