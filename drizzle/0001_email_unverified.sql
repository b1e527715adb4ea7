ALTER TABLE `users` ADD `email_unverified` integer DEFAULT true NOT NULL;--> statement-breakpoint
-- Accounts from before this column: trusted only when an administrator, a provider (an OAuth link)
-- or the lack of a password (made by the CLI or by OAuth) vouches for the address; a password
-- account could have come from an open sign-up.
UPDATE `users` SET `email_unverified` = false
  WHERE `is_admin` = 1 OR `password_hash` IS NULL OR `id` IN (SELECT `user_id` FROM `oauth_accounts`);
