/**
 * Admins' view and actions over users (admin page, `/api/admin`), and the audit log they leave.
 *
 * @packageDocumentation
 */
export { AuditLog, type IAuditAction, type IAuditEntry } from './audit';
export {
  AdminError,
  AdminService,
  stoppedReason,
  type IActor,
  type IAdminUser
} from './service';
