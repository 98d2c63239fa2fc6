import './base.css';
import './proposal.css';
import './sidebar.css';
