/**
 * Admins' view and actions over users (admin page, `/api/admin`), and the audit log they leave.
 *
 * @packageDocumentation
 */
export { AuditLog, type IAuditAction, type IAuditEntry } from './audit';
export {
  UserNotices,
  type IUserNotice,
  type IUserNoticeEvent
} from './notices';
export {
  AdminError,
  AdminService,
  stoppedReason,
  type IActor,
  type IAdminUser
} from './service';
